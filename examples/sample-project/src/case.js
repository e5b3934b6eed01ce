// Case conversion built on one word splitter.

/** Splits text into words at spaces, punctuation and lower-to-upper case changes. */
export function words(text) {
  return String(text)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
}

export function camelCase(text) {
  return words(text)
    .map((w, i) => (i === 0 ? w.toLowerCase() : w[0].toUpperCase() + w.slice(1).toLowerCase()))
    .join('');
}

export function kebabCase(text) {
  return words(text).join('-');
}

export function titleCase(text) {
  return words(text).map((w) => w[0].toUpperCase() + w.slice(1).toLowerCase()).join(' ');
}
