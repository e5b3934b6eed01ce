// URL slugs from free text.

const DEFAULT_SEPARATOR = '-';

/**
 * Lower-cases `text`, drops accents and punctuation, and joins the words with `separator`.
 * slugify('Hello, World!') === 'hello-world'
 */
export function slugify(text, { separator = DEFAULT_SEPARATOR } = {}) {
  return String(text)
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .join(separator);
}
