// Package docscheck keeps the documentation true to the tree: every
// relative link of the Markdown pages resolves, and every backticked Go
// identifier of this module that a page cites exists. Its tests run both
// checks over README.md, docs/*.md, bench/*.md and
// charts/vk-sandbox/README.md, check the docs/ paths that the module's Go
// comments cite, and check that docs/pod-contract.md's delete
// authorization table gives every verdict reason of the code. A failure
// names the page, the line and the link or identifier that does not
// resolve.
//
// A link is relative when it has no scheme: [text](path), [text](path#anchor)
// and [text](#anchor). Its path, taken from the page's directory, must be a
// file or directory of the repository; its anchor must be a heading of the
// target page, slugged as GitHub does (see Slug), or an explicit
// <a id="..."> / <a name="...">.
//
// A code span (text in single backticks, outside fenced blocks) is a Go
// identifier of this module, and must resolve, exactly when it has one of
// these shapes (an optional trailing "()" is ignored):
//
//   - pkg.Name or pkg.Type.Member, where pkg is the name of one of the
//     module's packages other than main (pool, store, sim, pipeline, kube,
//     vkcompat, telemetry, testkit, kubetest, e2e, ...) and Name and Type
//     are exported: Name must be a top-level declaration of that package
//     (a test function counts, from its _test.go files), Member a field or
//     method of Type there;
//   - Type.Member, where Type is a type the module declares (exported or
//     not), no package the module imports goes by that name (`node.X` is
//     virtual-kubelet's node package, or a Helm value), and the span is
//     not a string literal of the module's non-test code (a span name or
//     an attribute key such as `queue.wait`): Member must be a field or
//     method of a type of that name (promoted ones included);
//   - TestXxx, BenchmarkXxx, FuzzXxx or ExampleXxx, bare or followed by
//     /subtest: a function of that name must exist in a _test.go file.
//
// A code span naming a Go file ("`pipeline/claim.go`", or a link whose
// text it is) must exist when its directory is one of the module's, except
// on bench/HISTORY.md, whose runs cite the tree as it was. When the file
// is the module's, the code spans that follow it on its line, separated by
// spaces, commas, "and" or "or", name what that file declares: Name a
// top-level declaration or a method or field of a type declared there,
// Type.Member a method of Type declared there or a field of Type if Type
// is declared there. So "`pipeline/claim.go` `Engine.reconcile`" fails
// once reconcile moves to another file. A list that changes files says so
// with the next file ("`A` in `x.go`, read by `B` in `y.go`").
//
// Anything else is not checked: flags (`--node-name`), paths
// (`pool/store`), JSON and YAML fields (`spec.nodeName`,
// `serviceMonitor.enabled`), lower-case pkg.name forms (span names such as
// `store.commit`), other modules' identifiers (`nodeutil.NewNode`; cite
// one whose type name the module also declares with its package:
// `nodeutil.Node.runHTTP`), shell commands and bare names (`Running`, an
// Event reason).
package docscheck
