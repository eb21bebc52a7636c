/** One endpoint. (Being written.) */
export function EndpointPage({ id }: { id: string }) {
  return <h1>{id}</h1>;
}
