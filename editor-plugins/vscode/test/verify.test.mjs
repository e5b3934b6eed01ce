// Verify's Problems against the scripted fake kiln (no sandbox needed): a failure message keeps
// its lines, since an assertion's diff ("+ actual - expected", the caret) only reads line by line.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';

import { activate, fakeKiln, tempDir } from './helpers.mjs';

test('Verify: a multi-line failure message reaches Problems with its line breaks', async (t) => {
  const folder = tempDir('kiln-vsc-folder-');
  const { rec } = await activate({ folders: [folder], settings: { 'kiln.server.path': fakeKiln } }, t);
  rec.messageAnswers.push(undefined);
  const result = await rec.commands.get('kiln.verify')();
  assert.equal(result.status, 'fail');
  const list = rec.diagnostics.get('kiln').get(path.join(folder, 'test', 'case.test.js'));
  assert.equal(list.length, 1);
  assert.equal(list[0].range.start.line, 9);
  // CRLF becomes LF and trailing blanks go; the lines themselves stay as the runner wrote them.
  assert.equal(list[0].message,
    "kebabCase: Expected values to be strictly equal:\n+ actual - expected\n\n+ 'a'\n- 'b'\n    ^");
});
