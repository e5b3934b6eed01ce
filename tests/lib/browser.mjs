// Headless Chromium (Debian's, driven by playwright-core) for the browser tests, or the reason it
// cannot start here, which the test reports as a skip: never a pass.
import fs from 'node:fs';

export const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';

// Resolves { browser } or { why }.
export async function launchChromium() {
  if (!fs.existsSync(CHROMIUM)) return { why: `${CHROMIUM} not installed (Debian package chromium)` };
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (e) {
    return { why: `playwright-core not installed in tests/node_modules: ${e.message}` };
  }
  // Chromium's own sandbox cannot start as root; the test pages are ours, so that is fine here.
  const args = process.getuid?.() === 0 ? ['--no-sandbox'] : [];
  try {
    return { browser: await chromium.launch({ executablePath: CHROMIUM, args, timeout: 60000 }) };
  } catch (e) {
    return { why: `Chromium did not start: ${String(e.message).split('\n')[0]}` };
  }
}
