// Package render turns one requested change to one Kubernetes resource into the
// smallest edit of the Git repository that Argo CD deploys it from, and proves the
// edit right before anyone sees it.
//
// It owns the steps "locate + edit" and "verify" of the change pipeline: given a
// repository tree on disk, the Argo CD Applications that deploy from it, a target
// resource and a change, [Plan] finds where the change belongs (a kustomization's
// replicas or images entry, an existing patch, the resource's own document, a new
// replicas or images entry, or a new patch; for a data key of a ConfigMap a
// configMapGenerator makes, its literal or env file line, or a new literal, and
// for a removed key that literal, line or files entry deleted, the expectation
// then carrying the ConfigMap's new hashed name and the references renamed to
// it, see [Result].Renamed and [Result].Renames), edits only
// the bytes of that spot (through package render/yamledit), renders every affected
// Application before and after exactly as Argo CD would (kustomize through krusty
// with Argo CD's default options; Helm charts through the Helm SDK with the flags
// Argo CD passes to "helm template", a values key found by rendering being the
// edit, or, for a value the Application itself sets, that setting in the
// Application's manifest when the repository defines it (an app-of-apps: the
// child renders from the edited spec, the parent changes in that field alone);
// plain directories as their parsed documents, a List's items as objects of
// their own, edited in place inside the List), and
// accepts the edit only when each rendered object equals the before-render plus the
// requested change, field by field. Otherwise it returns a [*Refusal] with a stable
// code and a reason. A verified [Result] also carries the after-render of the
// changed objects, for a server-side dry-run (never serialised: they are the real
// objects). An edit that verifies is still refused (code secret) when its render
// gives a container's env variable or a ConfigMap's data key of a secret-looking
// name a plain value the before-render does not hold there: every view masks such
// a value, so it would reach Git unseen ([PlainSecretValue] says which values).
//
// A delete_resource change removes the target instead: its document (the whole
// file, and the file's entry in the kustomization listing it, when the file holds
// nothing else) where the app's own folder keeps it, a kustomize "$patch: delete"
// patch in the overlay for an object of a base, or the boolean Helm values key
// found by rendering whose flip stops the chart rendering it. The expected render
// is the before-render without the target; an object that other objects of the
// app still name (see referencesTo) and a Secret are refused, and an Application
// that does not prune is warned about.
//
// [FromArgoCD] is the one converter from an Argo CD Application (package argocd's
// model) to the Applications a [Request] names; the service and the offline plan
// command both use it. An Application render cannot render as Argo CD does keeps
// its reach and carries the reason: Plan refuses only an edit that reaches it.
//
// [Revert] undoes an earlier change on the tree as it is now (the lines it replaced
// come back, lines others changed since stay) and proves it the same way: each
// object the change touched renders as it did before the change, nothing else
// differs; a revert that would also undo later changes is refused.
//
// [ParseChangeArgs] reads a change as the offline plan command spells it
// ("scale deploy/web --replicas 4") into a Request's target and change.
//
// [Render] renders one Application without planning anything; its output may be
// kept (for example by commit, through [EncodeObjects]) and handed back to Plan as
// the before-render through [Request].BeforeRender.
//
// The package is pure: it reads the repository directory it is handed (read only,
// confined to that directory, symlinks that leave it refused), never writes to it,
// and does no network or database I/O. The chart dependencies a Chart.lock pins
// come through the [ChartSource] its caller puts in the context ([WithCharts]);
// without one they are refused. Secret values never appear in its output:
// files are masked by line from their parse before they are diffed (Secret data,
// kustomize generator literals and the env files and files they read, secret-named
// ConfigMap keys and env values, inline patches included), objects by structure,
// and free text (refusal reasons, warnings) is scrubbed of every secret value of
// the files a plan read. [MaskText] does the same for words from elsewhere about
// the changed objects.
//
// Repository content is untrusted. Every file a render reads, whoever asks for it
// (a Directory app, kustomize through the view it is given, the kustomization
// graph walk), passes one bounded reader that checks it against [MaxFileSize],
// [MaxAliasNodes], [MaxDepth], [MaxMappingKeys] and counts it against the bounds of
// one render and one plan ([MaxRenderDocuments], [MaxRenderNodes], [MaxRenderBytes],
// [MaxPlanBytes], [MaxPlanRenderBytes]) before any decoder, kustomize or Helm sees its bytes (a
// chart is further bounded by [MaxChartFiles], [MaxChartArchiveBytes],
// [MaxChartArchiveDepth] and [MaxHelmOutputBytes]); the kustomization
// graph is bounded by [MaxKustomizations] and cycles are refused before kustomize
// runs, and so is the work of its transformers ([MaxTransformedBytes]), which no
// read interrupts. Plan and Render run under [Timeout]. A kustomize build and a
// chart's templates run in worker processes of package render/helmexec (see
// [WithKustomizeWorkers], [WithHelmWorkers]), under a memory and a stack limit,
// killed when the render's context ends: the one thing render starts besides
// reading its directory. A build's every file system call is answered from the
// render's view, so the bounds above hold for it as in process. Where the
// process builds in process ([SetKustomizeInProcess]: the offline plan command),
// a build, which cannot be cancelled, is abandoned when its time passes, and its
// reads fail from then on.
package render
