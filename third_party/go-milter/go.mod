module github.com/emersion/go-milter

go 1.12

require github.com/emersion/go-message v0.18.2
