module example.com/automaxprocs

go 1.26

require go.uber.org/automaxprocs v1.6.0
