import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { formatDuration, TransferProgress } from './progress.js';

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  return {
    stream: new Writable({ write(chunk: Buffer, _e, done) { text += chunk.toString(); done(); } }),
    text: () => text,
  };
}

describe('transfer progress', () => {
  it('prints a line per completed image when not on a terminal', () => {
    const out = sink();
    const p = new TransferProgress(out.stream, { verb: 'bundled', totalBytes: 100, totalImages: 3, doneImages: 1, tty: false });
    p.addBytes(60);
    p.imageDone('quay.io/a@sha256:1', 2 * 1024 * 1024);
    p.finish();
    expect(out.text()).toBe('bundled 2/3 quay.io/a@sha256:1 (2.0 MiB)\n');
  });

  it('rewrites one line in place on a terminal with bytes, images and ETA', async () => {
    const out = sink();
    const p = new TransferProgress(out.stream, { verb: 'bundled', totalBytes: 4 * 1024 * 1024, totalImages: 2, tty: true });
    p.addBytes(1024 * 1024);
    p.imageDone('quay.io/a@sha256:1', 1);
    await vi.waitFor(() => expect(out.text()).toContain('images'), { timeout: 5000 });
    p.finish();
    expect(out.text()).toMatch(/^\r\x1b\[K1\.0 MiB of 4\.0 MiB, 1\/2 images, [\d.]+ [KMG]iB\/s ETA \d+s/);
    expect(out.text()).not.toContain('\n');
    expect(out.text().endsWith('\r\x1b[K')).toBe(true);
  });

  it('formats durations compactly', () => {
    expect([formatDuration(4.2), formatDuration(125), formatDuration(7300)]).toEqual(['5s', '2m05s', '2h01m']);
  });
});
