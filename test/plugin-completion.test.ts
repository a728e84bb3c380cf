/**
 * The npm package's plugin completion: kubectl (1.26+) runs `kubectl_complete-prestage` with the
 * words after `kubectl prestage`, the last one being completed, and reads Cobra's answer.
 */
import { expect, it } from 'vitest';
import { runBin } from './support/cli.js';

it('answers kubectl\'s and oc\'s plugin completion: candidates for the last word, then :4 (no file names)', async () => {
  expect(await runBin('kubectl_complete-prestage', ['st'])).toEqual({ code: 0, stdout: 'status\nstage\n:4\n', stderr: '' });
  expect((await runBin('oc_complete-prestage', ['plan', '--feature-'])).stdout).toBe('--feature-set\n--feature-gates\n:4\n');
  expect((await runBin('kubectl_complete-prestage', [])).stdout.split('\n')).toEqual(expect.arrayContaining(['plan', 'wait', 'version', ':4']));
});

it('`oc prestage completion` points at the plugin completion instead of a script that cannot work', async () => {
  expect(await runBin('oc-prestage', ['completion'])).toEqual({ code: 0, stdout: "# oc prestage completes through oc's plugin completion (kubectl 1.26+), not a script: put oc_complete-prestage (installed beside oc-prestage) on the PATH.\n", stderr: '' });
  expect((await runBin('prestage', ['completion'])).stdout).toMatch(/^###-begin-prestage-completions-###/);
});
