/**
 * Kubernetes resource quantities as this runtime reads and writes them: a decimal number and an optional suffix,
 * decimal (`m`, `k`, `M`, `G`, `T`, `P`) or binary (`Ki` … `Pi`), such as `8`, `500m`, `64Gi`. (The API server also
 * takes exponents and `E`/`Ei`; nothing here needs them.)
 */
const QUANTITY = /^(\d+(?:\.\d+)?)(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$/;

const UNITS: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

export const isQuantity = (text: string): boolean => QUANTITY.test(text);

/** The quantity's amount (`64Gi` = 68,719,476,736); undefined when it is not one. */
export function parseQuantity(text: string): number | undefined {
  const match = QUANTITY.exec(text.trim());
  return match ? Number(match[1]) * UNITS[match[2] ?? '']! : undefined;
}

/** `quantity` times `n`, in its own unit (`32Gi` × 2 = `64Gi`). */
export function scaleQuantity(quantity: string, n: number): string {
  const [, number, suffix = ''] = QUANTITY.exec(quantity)!;
  return `${Number((Number(number) * n).toFixed(3))}${suffix}`;
}
