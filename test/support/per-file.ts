/** Runs before every test file (vitest.config.ts `setupFiles`, even without isolation): its clean-ups at its end. */
import { afterAll } from 'vitest';
import { runCleanups } from './cleanup.js';

afterAll(runCleanups);
