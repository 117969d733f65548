// Election candidate for the benchmark's `election` scenario: npm
// `redis-leader` (0.1.0) over one ioredis client, with the library's
// defaults (ttl 10 s, wait 1 s between tries).
//
//     NODE_PATH=bench/peers/node/node_modules node elect.cjs PORT KEY
//
// Prints `ready` once it campaigns, `elected` when elected; `resign` on
// stdin makes it stop() (give up leadership). Killed by the benchmark.
'use strict';

const readline = require('readline');

let Leader, Redis;
try {
  Leader = require('redis-leader');
  Redis = require('ioredis');
} catch (e) {
  console.log('error ' + e.message.split('\n')[0]);
  process.exit(1);
}

const [port, key] = process.argv.slice(2);
const redis = new Redis({ port: Number(port), host: '127.0.0.1' });
const leader = new Leader(redis, { key });
leader.on('elected', () => console.log('elected'));
leader.on('error', (e) => console.log('error ' + e));
redis.once('ready', () => {
  leader.elect();
  console.log('ready');
});
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'resign') leader.stop();
});
