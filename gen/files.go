package main

// File is one generated output: its path relative to the repository root and its bytes.
// Every renderer in gen returns Files; one writer puts them on disk and TestGenerated
// compares them with the committed tree.
type File struct {
	Path string
	Data []byte
}
