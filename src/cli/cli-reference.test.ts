import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { renderCliReference } from './cli-reference.js';

it('docs/cli.md is what the commands print (rerun npm run docs:cli after changing a flag or help)', async () => {
  const reference = await renderCliReference();
  expect(reference).toContain('## prestage bundle create\n');
  expect(reference).toContain('--output-dir');
  expect(readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8')).toBe(reference);
}, 120_000);
