/** Cursor connections (`first` from 1 to 100, `after`) for every list that pages. */
import type { ArgBuilder, ObjectRef } from '@pothos/core';
import type { Page } from '../../../domain/pagination.js';
import { builder, type SchemaTypesOf } from '../builder.js';

const PageInfo = builder.objectRef<Page<unknown>>('PageInfo').implement({
  fields: (t) => ({
    hasNextPage: t.boolean({ resolve: (page) => page.nextCursor !== null }),
    endCursor: t.string({ nullable: true, resolve: (page) => page.nextCursor ?? page.cursors[page.cursors.length - 1] ?? null }),
  }),
});

export function connectionType<T>(name: string, node: ObjectRef<SchemaTypesOf, T>) {
  const Edge = builder.objectRef<{ node: T; cursor: string }>(`${name}Edge`).implement({
    fields: (t) => ({
      cursor: t.exposeString('cursor'),
      node: t.field({ type: node, resolve: (edge) => edge.node as never }),
    }),
  });
  return builder.objectRef<Page<T>>(`${name}Connection`).implement({
    fields: (t) => ({
      // The connection field already counts its page size (builder.ts `fieldComplexity`): these lists are those items.
      edges: t.field({
        type: [Edge],
        complexity: { field: 1, multiplier: 1 },
        resolve: (page) => page.items.map((item, i) => ({ node: item, cursor: page.cursors[i]! })),
      }),
      nodes: t.field({ type: [node], complexity: { field: 1, multiplier: 1 }, resolve: (page) => page.items as never }),
      pageInfo: t.field({ type: PageInfo, resolve: (page) => page as Page<unknown> }),
    }),
  });
}

/** The `first` and `after` arguments; their range is checked by the shared pagination rules. */
export const connectionArgs = (t: { arg: ArgBuilder<SchemaTypesOf> }) => ({
  first: t.arg.int({ description: 'Page size, from 1 to 100. @default 20' }),
  after: t.arg.string({ description: 'The `endCursor` of the previous page.' }),
});

export const CONNECTION_ARG_NAMES = { cursor: 'after', limit: 'first' } as const;
