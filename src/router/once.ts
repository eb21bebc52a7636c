/** Wraps `fn` so that only its first call runs (a slot is released once, an outcome recorded once). */
export function once<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
  let called = false;
  return (...args) => {
    if (called) return;
    called = true;
    fn(...args);
  };
}
