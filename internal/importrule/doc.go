// Package importrule holds one test, TestImportRule: the import rule of
// docs/architecture.md ("The import rule"), checked against the real
// imports of every package of this module. The rule lives in that page's
// table, so the page and the code cannot drift apart unnoticed. The package
// has no code of its own and nothing imports it.
package importrule
