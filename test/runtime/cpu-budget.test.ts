/** The CPU budget: replicas and engine threads never ask for more cores than the machine gives. */
import os from 'node:os';
import { expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { cpuBudget, parseCpuMax, usableCores } from '../../src/runtime/cpu-budget.js';

test('defaults by core count: one slot per core (at most 4), the cores but one shared out as threads', () => {
  const pick = (cores: number, slots?: number) => {
    const { threads, warning, ...rest } = cpuBudget({ cores, ...(slots === undefined ? {} : { slots }) });
    return { slots: rest.slots, threads, warning };
  };
  expect(pick(1)).toEqual({ slots: 1, threads: 1, warning: undefined });
  expect(pick(2)).toEqual({ slots: 2, threads: 1, warning: undefined });
  expect(pick(4)).toEqual({ slots: 4, threads: 1, warning: undefined });
  expect(pick(8)).toEqual({ slots: 4, threads: 1, warning: undefined });
  expect(pick(16)).toEqual({ slots: 4, threads: 3, warning: undefined });
  // An engine alone (npm run engine without --threads): 1 thread on 2 cores, as measured.
  expect(pick(2, 1)).toEqual({ slots: 1, threads: 1, warning: undefined });
  expect(pick(16, 1)).toEqual({ slots: 1, threads: 15, warning: undefined });
  for (const cores of [1, 2, 3, 4, 6, 8, 12, 16, 64, 256]) {
    const b = cpuBudget({ cores });
    expect(b.slots * b.threads, `${cores} cores`).toBeLessThanOrEqual(cores);
  }
});

test('explicit settings win; oversubscription is allowed with a warning that names both variables', () => {
  expect(cpuBudget({ cores: 16, slots: 1 })).toMatchObject({ slots: 1, threads: 15 });
  expect(cpuBudget({ cores: 2, threads: 2 }).warning).toMatch(
    /2 CPU replicas x 2 engine threads exceed the 2 cores.*CPU_SLOTS or ENGINE_THREADS/,
  );
  expect(cpuBudget({ cores: 4, slots: 0 })).toMatchObject({ slots: 0, threads: 3 });
  expect(cpuBudget({ cores: 2, slots: 3 }).warning).toContain('3 CPU replicas x 1 engine threads exceed the 2 cores');
  expect(cpuBudget({ cores: 4, slots: 0 }).warning).toBeUndefined();
});

test('a cgroup v2 quota counts as cores; "max" is no limit', () => {
  expect(parseCpuMax('max 100000\n')).toBeUndefined();
  expect(parseCpuMax('200000 100000\n')).toBe(2);
  expect(parseCpuMax('150000 100000')).toBe(1.5);
  expect(parseCpuMax('')).toBeUndefined();
  const cores = usableCores();
  expect(cores).toBeGreaterThanOrEqual(1);
  expect(cores).toBeLessThanOrEqual(os.availableParallelism());
});

test('the configuration takes the budget: defaults from the cores, variables override', () => {
  const defaults = cpuBudget();
  expect(loadConfig({})).toMatchObject({ cpuSlots: defaults.slots, engineThreads: defaults.threads });
  expect(loadConfig({ CPU_SLOTS: '1', ENGINE_THREADS: '1' })).toMatchObject({ cpuSlots: 1, engineThreads: 1, cpuWarning: undefined });
  expect(loadConfig({ CPU_SLOTS: '64', ENGINE_THREADS: '64' }).cpuWarning).toContain('Lower CPU_SLOTS or ENGINE_THREADS');
  expect(() => loadConfig({ ENGINE_THREADS: '0' })).toThrow('ENGINE_THREADS must be an integer from 1 to 1024');
});
