package githubtest

// TB is what the fake's helpers need of their caller: the part of testing.TB they
// use. A test passes its *testing.T; a program outside tests (hack/demo) passes its
// own, so the fake does not depend on the testing package.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(f func())
}
