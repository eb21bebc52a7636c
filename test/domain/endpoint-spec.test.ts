/** The endpoint spec's rules that need no database: here, the model revision a hub URL is built from. */
import { expect, test } from 'vitest';
import { parseCreateEndpoint } from '../../src/domain/endpoint-spec.js';
import { createBody } from '../support/gateway.js';

test.each(['main', 'v1.0', 'refs/pr/1', 'a'.repeat(40)])('revision %s is accepted', (revision) => {
  expect(parseCreateEndpoint(createBody('prj_1', { hfModelRepoRevision: revision })).type).toBe('ok');
});

// `..` would be a dot segment of the hub's URL (/revision/.. is the repo itself): git refuses these names too.
test.each(['..', '.', 'a..b', '.hidden', 'has space', 'a:b'])('revision %j is refused, naming the field and the rule', (revision) => {
  const parsed = parseCreateEndpoint(createBody('prj_1', { hfModelRepoRevision: revision }));
  expect(parsed.type).toBe('error');
  expect(JSON.stringify(parsed)).toContain('hfModelRepoRevision');
  expect(JSON.stringify(parsed)).toContain('must be a branch, tag or commit hash');
});
