from lsp_complete.cli import main

main()
