/** Runtime and API errors as one line of bounded length, for logs and a node's status. */
export function oneLine(text: string, maxLength = 4096): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, maxLength);
}
