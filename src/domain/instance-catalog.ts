/**
 * The instance options of the spec's table 2.5: four GPU kinds, each offered
 * with 1, 2, 4 or 8 GPUs. This table is the only place that knows the ids.
 */
export const GPU_TYPES = ['A100', 'H100', 'H200', 'B200'] as const;
export type GpuType = (typeof GPU_TYPES)[number];

export const GPU_COUNTS = [1, 2, 4, 8] as const;
export type GpuCount = (typeof GPU_COUNTS)[number];

export interface InstanceOption {
  id: string;
  gpuType: GpuType;
  numGpu: GpuCount;
  /** Memory of one GPU, in GB. */
  gpuMemoryGb: number;
}

const GPU_MEMORY_GB: Record<GpuType, number> = { A100: 80, H100: 80, H200: 141, B200: 192 };

const IDS: Record<GpuCount, Record<GpuType, string>> = {
  1: { A100: 'ShbPuOs4tfGb', H100: 'TwD5AqnBSVN0', H200: 'LnK1wTaKc7WO', B200: '8GiQTLKfJNOr' },
  2: { A100: 'mrAHuYt7T40o', H100: 'zfTutSiLn0Hq', H200: 'Tu6GjBnfHPe4', B200: 'brTZGIuYgVrs' },
  4: { A100: 'JkNob0NMdoF3', H100: 'lfkRz5G48REc', H200: 'OhTzYtZuomzI', B200: 'AFoZMFXZnAdD' },
  8: { A100: 'sYH4kHmAcA5P', H100: 'GUA4qYFmsYz8', H200: 'ahBzWtOuomsI', B200: 'drbc6G9FxJWZ' },
};

export const INSTANCE_OPTIONS: readonly InstanceOption[] = GPU_COUNTS.flatMap((numGpu) =>
  GPU_TYPES.map((gpuType) => ({ id: IDS[numGpu][gpuType], gpuType, numGpu, gpuMemoryGb: GPU_MEMORY_GB[gpuType] })),
);

const BY_ID = new Map(INSTANCE_OPTIONS.map((option) => [option.id, option]));

export function findInstanceOption(id: string): InstanceOption | undefined {
  return BY_ID.get(id);
}

/** An option's GPUs as people read them: "1 × A100 80 GB" (the memory is each GPU's). */
export function describeGpus(option: InstanceOption): string {
  return `${option.numGpu} × ${option.gpuType} ${option.gpuMemoryGb} GB`;
}

/** An option as people read it: its id, then its GPUs ("ShbPuOs4tfGb (1 × A100 80 GB)"). */
export function describeInstanceOption(option: InstanceOption): string {
  return `${option.id} (${describeGpus(option)})`;
}

export function instanceOptionFor(gpuType: GpuType, numGpu: GpuCount): InstanceOption {
  return BY_ID.get(IDS[numGpu][gpuType])!;
}

/** The accelerator used when a request names none: one H100. */
export const DEFAULT_INSTANCE_OPTION = instanceOptionFor('H100', 1);
