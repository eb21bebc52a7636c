/** Create and update forms. (Being written.) */
export function CreateEndpointPage() {
  return <h1>New endpoint</h1>;
}

export function EditEndpointPage({ id }: { id: string }) {
  return <h1>Edit {id}</h1>;
}
