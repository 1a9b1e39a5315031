// A process that starts one server through the harness, sends its pid over IPC, and waits to be killed.
import { Redis } from 'ioredis';
import { startRedis } from './redis-server.ts';

const server = await startRedis();
// The pid of the process that answers on the port, as Redis itself reports it.
const client = new Redis(server.url);
const info = await client.info('server');
client.disconnect();
process.send?.({ pid: Number(/process_id:(\d+)/.exec(info)?.[1]) });
// The channel closes when the test's process dies, however it dies: nothing is left behind then.
process.on('disconnect', () => process.exit(0));
