// Public entry point of textkit.
export { slugify } from './slugify.js';
export { wrap } from './wrap.js';
export { camelCase, kebabCase, titleCase, words } from './case.js';
