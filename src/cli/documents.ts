/**
 * The machine formats of `-o`, one document per command on stdout: JSON (indented, as `status`
 * and `plan` print it), YAML (the same object through js-yaml), or kubectl's `-o name`
 * (`KIND/NAME` per object). Warnings and progress never come here: they go to stderr.
 */
import yaml from 'js-yaml';

export type DocumentFormat = 'json' | 'yaml';

/** One command's result as a document. */
export function renderDocument(format: DocumentFormat, value: unknown): string {
  return format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : yaml.dump(value, { lineWidth: -1, noRefs: true });
}

/** One event of a stream (`wait -o json|yaml`): a JSON line, or a YAML document opened by `---`. */
export function renderEvent(format: DocumentFormat, event: unknown): string {
  return format === 'json' ? `${JSON.stringify(event)}\n` : `---\n${yaml.dump(event, { lineWidth: -1, noRefs: true })}`;
}

/** `-o name`, as kubectl prints it: `pinnedimageset/NAME`, one a line, in the order given. */
export function renderNames(kind: string, names: readonly string[]): string {
  return names.map((name) => `${kind}/${name}\n`).join('');
}

/** The machine format asked for, or undefined for the command's default text. */
export function machineFormat(output: unknown): DocumentFormat | undefined {
  return output === 'json' || output === 'yaml' ? output : undefined;
}
