import { describe, expect, it } from 'vitest';
import { pinPatternMatches, renderPinDropIn } from './crio.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;

describe('renderPinDropIn', () => {
  it('sorts and deduplicates, so equal pin lists give equal bytes', () => {
    expect(renderPinDropIn([image(2), image(1), image(2)])).toBe(renderPinDropIn([image(1), image(2)]));
    expect(renderPinDropIn([image(1)])).toContain(`[crio.image]\npinned_images = [\n  "${image(1)}",\n]\n`);
  });
  it("carries other files' pins after its own, each once, grouped by file", () => {
    const carried = new Map([['/etc/crio/crio.conf.d/50-pinned-images', [image(3), image(1)]], ['/etc/crio/crio.conf', ['quay.io/ocp/*']]]);
    expect(renderPinDropIn([image(2), image(1)], carried)).toContain(
      `pinned_images = [\n  "${image(1)}",\n  "${image(2)}",\n  # from /etc/crio/crio.conf\n  "quay.io/ocp/*",\n  # from /etc/crio/crio.conf.d/50-pinned-images\n  "${image(3)}",\n]\n`,
    );
  });
});

describe('pinPatternMatches', () => {
  it("matches as CRI-O does: the whole name, a trailing * glob, a *keyword*", () => {
    expect(pinPatternMatches(image(1), image(1))).toBe(true);
    expect(pinPatternMatches(image(1), image(2))).toBe(false);
    expect(pinPatternMatches('quay.io/ns/*', image(1))).toBe(true);
    expect(pinPatternMatches('quay.io/ocp/*', image(1))).toBe(false);
    expect(pinPatternMatches('registry.example/*', 'registry.example/a@sha256:1')).toBe(true);
    expect(pinPatternMatches('*pause*', 'registry.k8s.io/pause:3.10')).toBe(true);
    expect(pinPatternMatches('*pause*', 'registry.k8s.io/etcd:3.5')).toBe(false);
  });
});
