"""The book's shared prompt set: English sentences written for this project.

220 sentences, written for the book (no external corpus, no licence question), chosen to vary in
topic (everyday life, science, mathematics, cooking, politics, sport, technology, stories, business,
health, history, nature, travel, the arts, language), in form (statements, questions, commands,
exclamations, conditional and subordinate clauses) and in length (one word to about forty). Numbers,
dates and hyphenated words are included on purpose, because they split into many sub-word tokens.

Use :func:`prompts` rather than the constant when a chapter needs a subset: it draws a reproducible
sample with ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lib.errors import InputError

__all__ = ["PROMPTS", "load_prompts", "prompts"]

PROMPTS: tuple[str, ...] = (
    'The kettle clicked off just as the phone began to ring.',
    'My grandmother kept every letter she ever received in a tin box.',
    'Rain had turned the football pitch into a shallow brown lake.',
    'She painted the fence blue because the neighbours had all chosen white.',
    'The train to Glasgow was delayed by a signal failure near Preston.',
    'He forgot his umbrella on the bus for the third time this month.',
    'A small dog barked at the postman from behind the garden gate.',
    'We watched the sun set over the harbour while eating chips.',
    'The library closes early on Fridays during the summer holidays.',
    'Nobody remembered who had left the bicycle chained to the railings.',
    'Photosynthesis converts light energy into chemical energy stored in sugars.',
    "The mitochondria produce most of the cell's supply of adenosine triphosphate.",
    'Water expands when it freezes, which is why pipes burst in winter.',
    'A prime number has exactly two distinct positive divisors.',
    'Sound travels faster through steel than through air.',
    'The speed of light in a vacuum is a universal constant.',
    'Volcanic ash can stay in the upper atmosphere for several years.',
    'Enzymes lower the activation energy of chemical reactions.',
    "The moon's gravity is the main cause of ocean tides.",
    'Bacteria can exchange genes through small circular pieces of DNA.',
    'Every square matrix has at least one complex eigenvalue.',
    'The determinant of a product equals the product of the determinants.',
    'If a sequence is bounded and monotone, then it converges.',
    'The sum of the angles of a triangle in the plane is one hundred and eighty degrees.',
    'A function that is differentiable at a point is also continuous there.',
    'The power method finds the eigenvector with the largest eigenvalue in modulus.',
    'Random vectors in high dimensions are almost orthogonal to each other.',
    'The rank of a matrix never exceeds the smaller of its two dimensions.',
    'Gradient descent can oscillate when the step size is too large.',
    'A softmax turns a list of scores into a probability distribution.',
    'Preheat the oven to two hundred degrees before you put the bread in.',
    'Chop the onions finely and fry them slowly until they turn golden.',
    'Add a pinch of salt to the water before the pasta goes in.',
    'Let the dough rest for an hour in a warm place.',
    'Whisk the eggs and sugar until the mixture is pale and thick.',
    'Serve the soup hot with a slice of fresh sourdough.',
    'Store the jam in sterilised jars and keep it somewhere cool.',
    'The recipe calls for three ripe bananas and a cup of flour.',
    'Toast the cumin seeds in a dry pan until they smell nutty.',
    'Never leave a pan of hot oil unattended on the stove.',
    'The committee postponed its decision until after the election.',
    'Parliament voted to extend the deadline by six months.',
    'The mayor promised to build two new bridges across the river.',
    'Voters in the coastal towns complained about the cost of housing.',
    'The treaty was signed in a small hall overlooking the lake.',
    'Local councils are struggling to pay for road repairs.',
    'The minister resigned after the report was published.',
    'Turnout was higher among younger voters than in previous years.',
    'The court ruled that the contract had never been valid.',
    'Negotiations broke down late on Sunday evening.',
    'The striker scored twice in the last ten minutes of the match.',
    'Our team lost the final on penalties after a goalless draw.',
    'She ran the marathon in just under three and a half hours.',
    'The cyclists climbed the mountain pass in thick fog.',
    'He has played chess at the same café every Saturday for twenty years.',
    'The swimmer broke the national record in the heats.',
    'Cricket matches can last for five days and still end in a draw.',
    'The referee stopped the game because of lightning.',
    'The young goalkeeper saved a penalty on her debut.',
    'Tennis players change ends after every odd-numbered game.',
    'Please restart the router and wait for the green light.',
    'The update deleted all of my saved passwords.',
    'Our server logs show a spike in traffic every night at midnight.',
    'The laptop battery lasts about six hours on a full charge.',
    'A compiler translates source code into machine instructions.',
    'The website crashed when thousands of people tried to buy tickets.',
    'Encrypt your backups before you upload them to the cloud.',
    'The printer on the second floor has been jammed since Tuesday.',
    'Version control lets a team work on the same code without chaos.',
    'This function returns an empty list when the input is missing.',
    'Why did the meeting start half an hour late?',
    'Have you ever seen a whale from the deck of a ferry?',
    'Where did you put the keys to the shed?',
    'Could you turn the music down a little, please?',
    'What time does the last bus leave the station?',
    'How many languages does your cousin speak?',
    'Is it true that octopuses have three hearts?',
    'Who wrote the song that was playing in the shop?',
    'When will the results of the survey be published?',
    'Which road should we take to avoid the traffic?',
    'Close the window before the storm arrives.',
    'Read the instructions carefully before you assemble the shelf.',
    'Sign the form and return it by the end of the week.',
    'Water the tomatoes every evening while I am away.',
    'Turn left at the church and follow the road to the farm.',
    'Keep your passport somewhere safe during the journey.',
    'Remember to switch off the lights when you leave.',
    'Write your name at the top of every page.',
    'Take two tablets with water after each meal.',
    'Lock the door and leave the key under the flowerpot.',
    'Once upon a time a fisherman caught a fish that could talk.',
    'The old lighthouse keeper had not spoken to anyone in weeks.',
    'At midnight the statue in the square turned its head.',
    'The dragon guarded a treasure that nobody had ever seen.',
    'A stranger arrived in the village carrying a locked suitcase.',
    'The children found a map hidden inside an old piano.',
    'Every winter the fox returned to the same hollow oak.',
    'The princess preferred astronomy to dancing.',
    'In the morning the snow had covered every footprint.',
    'The clock in the hallway stopped at the moment he left.',
    'Shares in the airline fell sharply after the profit warning.',
    'The central bank raised interest rates by a quarter of a point.',
    'Inflation eased slightly in the spring but remained above target.',
    'The bakery on the corner doubled its prices within a year.',
    'Small businesses rely heavily on short-term loans.',
    'The company plans to open forty new stores next year.',
    'Unemployment fell to its lowest level in a decade.',
    'Exports of coffee have grown steadily since the drought ended.',
    'The merger will create the largest shipping firm in Europe.',
    'Investors are worried about the cost of energy.',
    'The patient was advised to rest and drink plenty of fluids.',
    'Regular exercise lowers the risk of heart disease.',
    'The new vaccine is given in two doses a month apart.',
    'Sleep deprivation affects memory and concentration.',
    'The nurse checked his blood pressure twice an hour.',
    'Children should eat at least five portions of fruit and vegetables a day.',
    'The clinic opens at eight and closes at six.',
    'A sprained ankle usually heals within a few weeks.',
    'The doctor ordered an X-ray to rule out a fracture.',
    'Washing your hands often helps to stop infections spreading.',
    'The bridge was completed in eighteen ninety after a decade of work.',
    'The empire collapsed when its provinces stopped paying taxes.',
    'Medieval monks copied books by hand in cold stone rooms.',
    'The printing press changed how ideas spread across Europe.',
    'The explorers reached the source of the river after months of travel.',
    'Ancient sailors navigated by the positions of the stars.',
    'The castle was besieged for nine months but never fell.',
    'The first railways carried coal long before they carried passengers.',
    'Historians still argue about the causes of the war.',
    'The city walls were pulled down to make room for new streets.',
    'Snow leopards live in the high mountains of Central Asia.',
    'A flock of starlings swirled above the reed beds at dusk.',
    'Bees communicate the location of flowers by dancing.',
    'The oak tree in the park is more than three hundred years old.',
    'Coral reefs are home to a quarter of all marine species.',
    'Wolves were reintroduced to the valley twenty years ago.',
    'The desert blooms for a few weeks after the spring rains.',
    'Salmon swim upstream to spawn in the rivers where they hatched.',
    'Mushrooms appeared overnight on the damp lawn.',
    'The owl turned its head almost all the way around.',
    'Honestly, I think the film was far too long.',
    'It was the best holiday we have had in years.',
    "I can't believe how quickly the children have grown.",
    'The concert was loud, crowded and absolutely wonderful.',
    'That was the most boring lecture I have ever attended.',
    "I'm not sure whether to laugh or cry about it.",
    'We were so tired that we fell asleep on the sofa.',
    'Frankly, the new design is a big improvement.',
    'I wish we had booked the table a little earlier.',
    'She was delighted with the results of her exam.',
    'The museum has a collection of over two thousand clocks.',
    'Our flight was cancelled, so we spent the night at the airport.',
    'The hotel room had a view of the mountains and a tiny balcony.',
    'Pack light if you want to travel by train across Europe.',
    'The ferry crossing takes about four hours in calm weather.',
    'The market sells spices, carpets and hand-painted tiles.',
    'We hired bicycles and rode along the canal to the next town.',
    'The border crossing was quicker than we expected.',
    'It is cheaper to buy a rail pass than individual tickets.',
    'The island has no cars, only bicycles and horses.',
    'The orchestra played a symphony that lasted over an hour.',
    'He learned to play the violin at the age of forty.',
    'The novel was translated into more than thirty languages.',
    'The gallery reopened after a long restoration.',
    'Her poems are short, strange and very funny.',
    'The band recorded their first album in a garage.',
    'The sculpture is made entirely of recycled bicycle parts.',
    'The play was performed outdoors on a summer evening.',
    'The painter mixed sand into her colours to add texture.',
    'The choir sang in a language that nobody in the audience understood.',
    'Although it was raining, the parade went ahead as planned.',
    'If the parcel does not arrive by Monday, we will ask for a refund.',
    'Because the road was closed, we had to take a long detour.',
    'The more you practise, the easier the piano becomes.',
    'Unless the weather improves, the harvest will be late.',
    'While the kettle boiled, she read the first chapter.',
    'Since the factory closed, the town has become very quiet.',
    'Even though he was exhausted, he finished the report.',
    'As soon as the bell rang, the pupils rushed outside.',
    'Whenever it snows, the school buses run late.',
    'Yes.',
    'Thank you very much.',
    'Good morning, everyone.',
    'Not today.',
    'See you tomorrow.',
    'Absolutely not!',
    'Happy birthday!',
    'That makes sense.',
    'Of course.',
    'Well done.',
    'The report, which had been delayed twice, finally arrived on Thursday, and it confirmed what many engineers had suspected for years: the old dam needed urgent repairs.',
    'When the fog lifted, the fishermen saw that the storm had torn three boats from their moorings and left the harbour wall cracked in several places.',
    'After years of careful measurement, the astronomers concluded that the faint star was in fact two stars orbiting each other every eleven days.',
    'The teacher explained that a good experiment changes one thing at a time, measures the result carefully, and repeats the whole procedure several times.',
    'Although the recipe looked simple, it took the whole afternoon, two broken bowls and a great deal of patience before the cake was ready.',
    'The volunteers planted four hundred trees along the river bank, hoping that their roots would hold the soil together during the spring floods.',
    'Researchers at the university found that students who slept well before an exam remembered more than those who stayed up revising.',
    'The museum guide told us that the tapestry had been hidden in a cellar during the war and was only rediscovered fifty years later.',
    'The robot vacuum cleaner got stuck under the sofa again.',
    'Three hundred and sixty-five days make an ordinary year.',
    'The password must contain at least twelve characters.',
    'In 1969 two astronauts walked on the surface of the moon.',
    'The temperature dropped to minus fifteen degrees overnight.',
    'Chapter seven explains the proof in more detail.',
    'The meeting room on the fourth floor seats about twenty people.',
    'Our flat is a ten-minute walk from the station.',
    'The parcel weighs just over two kilograms.',
    'The survey asked 1,200 people about their commuting habits.',
    'The bus leaves at 7.45 every weekday morning.',
    'Flat 3B was rented for £950 a month in 2023.',
    'Grammar is the set of rules that tells us how words combine into sentences.',
    'Some languages put the verb at the end of the sentence.',
    'A single word can have dozens of different meanings.',
    'Children learn their first language without any formal lessons.',
    'Punctuation can completely change the meaning of a sentence.',
    'The dictionary added several hundred new words this year.',
    'Many English words were borrowed from French after the eleventh century.',
    'Sign languages have their own grammar and vocabulary.',
    'Rhymes help young children to remember new words.',
    'Translating jokes is notoriously difficult.',
)
"""Every prompt, in a fixed order. The order groups sentences by theme; :func:`prompts` shuffles."""


def prompts(n: int | None = None, seed: int = 0) -> list[str]:
    """A reproducible list of prompts.

    Args:
        n: how many; ``None`` returns all of :data:`PROMPTS` in their stored order.
        seed: seed of the sample (``numpy.random.default_rng(seed)``, without replacement).

    Returns:
        ``n`` distinct sentences; the same ``(n, seed)`` always gives the same list, and a smaller
        ``n`` with the same seed gives a prefix of a larger one.

    Raises:
        ValueError: if ``n`` is negative or larger than the number of prompts.
    """
    if n is None:
        return list(PROMPTS)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int or None, got {type(n).__name__}")
    if not 0 <= n <= len(PROMPTS):
        raise ValueError(f"n must be between 0 and {len(PROMPTS)} (the size of the prompt set), got {n}")
    order = np.random.default_rng(seed).permutation(len(PROMPTS))
    return [PROMPTS[i] for i in order[:n]]


def load_prompts(source: str | Path | None = None) -> list[str]:
    """The prompt set a chapter's parameters cell names: ``None`` for the book's (:func:`prompts`, all of them),
    or a UTF-8 text file of the reader's, one prompt per line (blank lines and surrounding spaces dropped).

    Raises:
        InputError: the file does not exist, is not a file, or holds no prompt.
    """
    if source is None:
        return prompts()
    path = Path(source).expanduser()
    if not path.is_file():
        raise InputError(f"prompts file {str(path)!r} not found (give a text file with one prompt per line, "
                         "or None for the book's prompts)")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    texts = [line for line in lines if line]
    if not texts:
        raise InputError(f"prompts file {str(path)!r} holds no prompt (one prompt per line; blank lines are skipped)")
    return texts
