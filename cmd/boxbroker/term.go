package main

import (
	"os"

	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func readPassword(f *os.File) ([]byte, error) { return term.ReadPassword(int(f.Fd())) }
