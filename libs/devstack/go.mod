module github.com/analyticsco/platform/libs/devstack

go 1.26

require github.com/analyticsco/platform/libs v0.0.0

replace github.com/analyticsco/platform/libs => ../
