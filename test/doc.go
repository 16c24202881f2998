// Package test holds the project's checks that need heavy dependencies: mixin and dashboard
// checks, deployment-example validation and the end-to-end test.
package test
