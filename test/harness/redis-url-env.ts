// Hands the run's Redis to the testing guide's examples as REDIS_URL, as a user's CI would set it.
import { inject } from 'vitest';

process.env.REDIS_URL = inject('redisUrl');
