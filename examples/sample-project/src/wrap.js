// Greedy word wrapping.

/**
 * Wraps `text` into lines of at most `width` characters, breaking at spaces. A word longer than
 * `width` stays whole on its own line.
 */
export function wrap(text, width = 80) {
  if (!Number.isInteger(width) || width < 1) throw new RangeError('width must be a positive integer');
  const lines = [];
  let line = '';
  for (const word of String(text).split(/\s+/).filter(Boolean)) {
    if (line === '') {
      line = word;
    } else if (line.length + 1 + word.length <= width) {
      line += ' ' + word;
    } else {
      lines.push(line);
      line = word;
    }
  }
  if (line !== '') lines.push(line);
  return lines.join('\n');
}
