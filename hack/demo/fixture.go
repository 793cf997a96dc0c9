package main

// sampleRepo is the manifest repository the demo writes into the simulated GitHub:
// one app of plain manifests (an Argo CD Directory source), as small as a real one
// can be.
var sampleRepo = map[string]string{
	"README.md": "# shop\n\nManifests of the shop team, deployed by Argo CD from `apps/`.\n",
	"apps/web/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kukie-demo
  labels:
    app: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx:1.27-alpine
          ports:
            - containerPort: 80
          resources:
            requests:
              cpu: 10m
              memory: 16Mi
`,
	"apps/web/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: kukie-demo
spec:
  selector:
    app: web
  ports:
    - port: 80
`,
}

// appPath is the folder of the sample app.
const appPath = "apps/web"
