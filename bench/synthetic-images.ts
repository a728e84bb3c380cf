/**
 * bench:agent's BENCH_IMAGES mode: N tiny images, each one unique layer (one small file) and
 * its own config, in one quay.io repository per N (the test bed mirrors quay.io to the bench's
 * registry), so the agent's memory can be read against the number of images alone.
 */
import { buildImage, gzipLayer } from '../fixtures/image.js';
import type { PushableFixture } from '../fixtures/push.js';
import { RegistryContent } from '../fixtures/repositories.js';
import { tarArchive } from '../fixtures/tar.js';

export interface SyntheticImages {
  readonly fixture: PushableFixture;
  /** Pull specs by digest, as a PinnedImageSet names them. */
  readonly pullSpecs: readonly string[];
}

export function syntheticImages(count: number): SyntheticImages {
  const content = new RegistryContent();
  const name = `prestage-bench/tiny-${count}`;
  const repo = content.repository(name);
  const pullSpecs: string[] = [];
  for (let i = 0; i < count; i++) {
    const layer = gzipLayer(tarArchive([{ type: 'dir', path: 'bench' }, { type: 'file', path: `bench/image-${count}-${i}`, data: Buffer.from(`image ${i} of ${count}\n`) }]));
    const image = buildImage({ format: 'oci', platform: { architecture: 'amd64', os: 'linux' }, layers: [layer], labels: { 'prestage.dev/bench': `${count}-${i}` }, entrypoint: ['/bin/true'], created: '2026-01-01T00:00:00Z' });
    repo.addImage(image);
    pullSpecs.push(`quay.io/${name}@${image.digest}`);
  }
  return { fixture: { blobs: content.blobs, repositories: content.toRepositories() }, pullSpecs };
}
