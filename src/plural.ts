/** `1 set`, `2 sets`: counts in messages read right for one. Below every printer; imports nothing. */
export function plural(count: number, one: string, many = `${one}s`): string {
  return count === 1 ? one : many;
}

/** `1 set`, `3 sets`, `1 attempt`. */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${plural(n, one, many)}`;
}
