// One lint configuration for the whole tree: typescript-eslint's recommended
// rules, with formatting left to Prettier (eslint-config-prettier turns off
// every rule that would fight it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.data/', '.tmp/', 'dist/', 'src/sdk/generated/', 'src/console/api/generated.ts', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // The web console runs in the browser.
    files: ['src/console/**'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // Tests and benchmarks read arbitrary JSON answers; `any` is allowed there, never in src/.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  prettier,
);
