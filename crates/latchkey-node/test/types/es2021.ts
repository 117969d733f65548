// An ES2021 program (no ErrorOptions, no Symbol.asyncDispose in its lib):
// the package's types must still compile with skipLibCheck off.
import { Client, LatchkeyError, LockLost, Guard } from 'latchkey-redis';

export async function main(): Promise<void> {
  const client = await Client.connect('redis://127.0.0.1:6380/');
  const guard: Guard = await client.lock('x', { ttl: 1000 }).acquire();
  if (guard.signal.reason instanceof LockLost) console.log(guard.signal.reason.reason);
  const e = new LatchkeyError('m');
  console.log(e.code, await guard.release());
  await client.close();
}
