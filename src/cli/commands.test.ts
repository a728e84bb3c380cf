import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { COMMANDS } from './commands.js';

const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url));

it("every command's help names a docs page that exists and that the README links", () => {
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  for (const [name, { docs }] of Object.entries(COMMANDS)) {
    expect(existsSync(`${DOCS}${docs}`), `${name}: docs/${docs}`).toBe(true);
    expect(readme, `README links docs/${docs}`).toContain(`docs/${docs}`);
  }
});
