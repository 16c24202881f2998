package main

// The usual way services link automaxprocs: its init sets GOMAXPROCS from the quota.
import _ "go.uber.org/automaxprocs"
