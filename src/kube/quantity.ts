/** Kubernetes resource quantities, as Nodes report allocatable ephemeral storage. */
const QUANTITY_SUFFIXES: Record<string, number> = {
  '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** A Kubernetes resource quantity (`120Gi`, `100G`, `128849018880`, `1e9`) in bytes. */
export function parseQuantity(text: string): number | undefined {
  const match = /^([0-9.]+(?:e[0-9]+)?)([A-Za-z]*)$/.exec(text.trim());
  const factor = match ? QUANTITY_SUFFIXES[match[2]!] : undefined;
  return match && factor !== undefined ? Number(match[1]) * factor : undefined;
}
