"""The built-in codegen command behind ``bot.codegen``: a mention in (as JSON on stdin), one
checked single-page app out (``<out>/<slug>/index.html``), and its result as JSON on the last
stdout line (``{"url": ..., "title": ..., "tokens": ...}``).

    echo '{"_id": "did:plc:x:3k", "text": "@bot make me a pomodoro timer"}' | python -m bot.codegen --out site --base-url https://me.github.io/builds

    bot.codegen.settings   [codegen]: the provider (templates, openai, anthropic), model, budget
    bot.codegen.templates  the offline generator (a few kinds of app)
    bot.codegen.prompts    what a language model is told: rules and canary, plan, code, repair
    bot.codegen.checks     the page checks, the Content-Security-Policy, the credit
    bot.codegen.browser    the load check in headless chromium
    bot.codegen.generate   one build: the steps, one repair round, the tokens spent
    bot.codegen.__main__   the command

Any other command can replace it (``bot.codegen`` in the settings): it gets the job as JSON on
stdin and prints its result as JSON on its last stdout line.
"""
