import path from 'node:path';
import { expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';

test('defaults with no variables set', () => {
  expect(loadConfig({})).toEqual({ port: 8080, host: '0.0.0.0', databaseUrl: undefined, dataDir: path.resolve('.data'), adminApiKey: undefined });
});

test('malformed variables name the variable and the rule', () => {
  expect(() => loadConfig({ PORT: '70000' })).toThrow('PORT must be an integer from 0 to 65535 (got "70000")');
  expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow('DATABASE_URL must use the postgres:// or postgresql:// scheme');
  expect(() => loadConfig({ DATABASE_URL: 'not a url' })).toThrow('DATABASE_URL must be a URL');
  expect(() => loadConfig({ ADMIN_API_KEY: 'short' })).toThrow('ADMIN_API_KEY must be 20 to 200 characters');
  expect(loadConfig({ DATABASE_URL: 'postgres://u:p@db:5432/x', PORT: '9000', DATA_DIR: '/var/lib/x' })).toMatchObject({
    port: 9000,
    databaseUrl: 'postgres://u:p@db:5432/x',
    dataDir: '/var/lib/x',
  });
});
