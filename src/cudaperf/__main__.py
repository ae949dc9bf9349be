from cudaperf.cli import main

main()
