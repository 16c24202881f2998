// A separate module so that the FUSE library the tests use stays out of the exporter's go.mod.
module quota-exporter-test/fuseserver

go 1.26

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.28.0 // indirect
