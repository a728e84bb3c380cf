// Test-only, loaded with NODE_OPTIONS=--import=<this file>: appends the URL of every ES module the
// process resolves to $PRESTAGE_TEST_IMPORTS_FILE, so a test sees which of prestage's files a command loaded.
import { register } from 'node:module';

const hooks = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.PRESTAGE_TEST_IMPORTS_FILE, resolved.url + '\\n');
  return resolved;
}`;
if (process.env.PRESTAGE_TEST_IMPORTS_FILE) register(`data:text/javascript,${encodeURIComponent(hooks)}`);
