'use strict';
// Loads the native layer built for this platform (`napi build --platform`
// names it so): latchkey-node.<platform>-<arch>[-gnu].node at the package's root.
const path = require('node:path');

function triple() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    // glibc or musl: a glibc process reports its version in the header.
    const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  return `${platform}-${arch}`;
}

const file = path.join(__dirname, '..', `latchkey-node.${triple()}.node`);
let native;
try {
  native = require(file);
} catch (e) {
  const hint =
    e.code === 'MODULE_NOT_FOUND'
      ? `no native build for ${triple()} (${file}); this package is built for linux-x64-gnu ` +
        `(README: "Node.js"); on a machine with Rust, \`npm install ./crates/latchkey-node\` builds it`
      : e.message;
  throw new Error(`latchkey-redis: cannot load its native layer: ${hint}`, { cause: e });
}
module.exports = native;
