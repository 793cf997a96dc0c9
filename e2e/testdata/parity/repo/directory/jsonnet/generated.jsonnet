local name = 'jsonnet-generated';
{
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: name },
  data: { source: 'jsonnet', replicas: std.toString(1 + 2) },
}
