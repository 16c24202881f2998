module execloop

go 1.24
