module stwprog

go 1.22
