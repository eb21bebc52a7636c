/** How many items one page of any list may hold (`limit`, GraphQL `first`): 1 to 100, 20 when omitted. Read by the server's pagination (pagination.ts) and by the console, which has no Node.js APIs. */
export const PAGE_LIMIT = { min: 1, max: 100, default: 20 } as const;
